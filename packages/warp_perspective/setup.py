import runpy
from pathlib import Path

from setuptools import setup

from shared_build import setup_kwargs

here = Path(__file__).resolve().parent
# build_opencv.py picks the CPU backend: OpenCV if pkg-config finds it, else built-in.
opencv_overrides = runpy.run_path(str(here / "build_opencv.py"))["opencv_overrides"]
setup(**setup_kwargs(here, **opencv_overrides()))

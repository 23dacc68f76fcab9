from pathlib import Path

from setuptools import setup

from shared_build import setup_kwargs

setup(**setup_kwargs(Path(__file__).resolve().parent))

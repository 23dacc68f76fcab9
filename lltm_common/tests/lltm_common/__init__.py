"""What the lltm_cpu and lltm_cuda test suites share: the plain-PyTorch reference LLTM
(reference.py), the battery's declaration (battery.py) and the test cases both packages
must pass (suite.py).

Each package's tests/ folder links this one (tests/lltm_common; its sdist carries the
files) and its tests/conftest.py defines the ``impl`` fixture (which package, on which
device); its test module star-imports the suite.
"""

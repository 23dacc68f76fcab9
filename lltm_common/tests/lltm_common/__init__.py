"""What the lltm_cpu and lltm_cuda test suites share: the plain-PyTorch reference LLTM
(reference.py) and the test cases both packages must pass (suite.py).

Each package's tests/conftest.py puts this folder's parent on sys.path (lltm_common/tests
in a checkout, _vendor/lltm_common/tests in an sdist) and defines the ``impl`` fixture
(which package, on which device); its test module star-imports the suite.
"""

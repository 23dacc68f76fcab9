"""The machinery behind a repository's noxfile, so that the noxfile only declares sessions:

- ``repo``: the repository's folders, torch matrix, packages, build digests and locks
- ``envs``: one virtual environment per torch (TorchEnv, SanitizedEnv), each package built
  into it only when it changed, each stable-ABI package's one wheel built once
- ``reports``: each session's times and test counts for CI's closing table
- ``suites``: what the test sessions run and what the tests learn from nox
- ``release``: the manylinux wheelhouse (auditwheel repair and show, twine, index.html)
- ``abi``: nox -s abi_overhead's driver
- ``cpython``: a second CPython built from Debian's source package, and nox -s
  wheels_cpython's proof of the wheelhouse under it (no compiler, the sdists' tests)
- ``ci``: the sessions CI runs, in lanes (``python -m shared_build.workspace ci-sessions``)

``import shared_build`` never imports this package, and nothing here imports nox: the
functions take nox's session as an argument.
"""

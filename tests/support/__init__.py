"""What the tests and the tools in tools/ share: one way to run a daemon (`daemon`), one
way to wait (`wait`), one way to start the stand-in agent (`spawn`) and one assertion for
a refused request (`refusal`). Fixtures are declared in tests/conftest.py, on top of these.
"""

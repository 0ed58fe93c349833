"""Reliability and security tests: kill -9 crash loops, injected disk faults, load,
a socket fuzzer and access control, against the real daemon and CLI processes."""

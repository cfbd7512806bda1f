"""The Python dissector, kept as the tests' differential oracle: tests/test_native.py
parses every sample and crafted capture with it and with the Rust core
(``nfstrace.parsers.native``) and compares the tables.  Nothing in the package
imports it; ``oracle.frame_loop.parse`` has the contract of
``nfstrace.parsers.native.parse``.
"""

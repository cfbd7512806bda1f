"""Parser layer: capture files -> frames -> ONC-RPC messages.

The dissection is the Rust core's (``native/``, the ``nfstrace._native``
extension), turned into tables by ``native``; ``backends`` names the
``--parser`` choices (``native``, ``pyshark``).  ``capture`` opens capture
files (decompressed, pipes spooled) and hands out their frames, read by the
Rust core's reader, for ``watch``, ``spans`` and ``parallel``; ``link`` finds a
frame's IP header;
``stats`` and ``tables`` are the shapes of what a parse returns.
"""

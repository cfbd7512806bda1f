"""Parser layer: capture files -> frames -> ONC-RPC messages.

The dissection is the Rust core's (``native/``, the ``nfstrace._native``
extension), turned into tables by ``native``; ``backends`` names the
``--parser`` choices (``native``, ``pyshark``).  In Python: ``capture`` (with
``pcap``, ``pcapng``, ``resync``) reads capture files into frames for
``watch``, ``spans`` and ``parallel``; ``link`` finds a frame's IP header;
``stats`` and ``tables`` are the shapes of what a parse returns.
"""

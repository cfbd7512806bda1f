"""Parser layer: capture files -> frames -> ONC-RPC messages.

One module per concern: ``capture`` (pcap/pcapng/compressed files),
``link`` (layer 2), ``ip`` (IPv4/IPv6 and fragments), ``tcp`` (stream
reassembly and record marking), ``xdr`` and ``rpc`` (RPC header), and
``frame_loop``/``dissector`` (the Python parser's loop over frames; ``native``
runs the Rust one, ``backends`` picks).
"""

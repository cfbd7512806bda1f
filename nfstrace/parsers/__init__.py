"""Parser layer: capture files -> frames -> ONC-RPC messages.

One module per concern: ``capture`` (pcap/pcapng/compressed files),
``link`` (layer 2), ``ip`` (IPv4/IPv6 and fragments), ``tcp`` (stream
reassembly and record marking), ``xdr`` and ``rpc`` (RPC header), and
``fast`` (the default parser's frame loop).
"""

"""IP numbers the parser reads packets with: the upper-layer protocol numbers
of an IPv4 header's protocol field and an IPv6 header's next header (the IANA
"Assigned Internet Protocol Numbers" registry: TCP RFC 9293, UDP RFC 768) and
the IPv6 extension headers (RFC 8200 §4: hop-by-hop options, routing,
fragment, destination options; AH RFC 4302; mobility RFC 6275).
"""

from __future__ import annotations

# IP protocol numbers
PROTO_TCP = 6
PROTO_UDP = 17
# IPv6 extension headers (next-header values)
IPV6_HOPOPTS = 0
IPV6_ROUTING = 43
IPV6_FRAGMENT = 44
IPV6_AH = 51
IPV6_DSTOPTS = 60
IPV6_MOBILITY = 135

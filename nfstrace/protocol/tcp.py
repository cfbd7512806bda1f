"""TCP numbers the parser reads segments with (RFC 9293): the header's flags
the transport events follow, the options of a SYN (MSS, RFC 9293 §3.2;
window scale, RFC 7323 §2, at most 14) and sequence-number arithmetic
(modulo 2^32: a number is ahead of another when their difference, masked, is
below half the space).
"""

from __future__ import annotations

# TCP flags
TH_FIN = 0x01
TH_SYN = 0x02
TH_RST = 0x04
TH_ACK = 0x10
# TCP options (RFC 9293, RFC 7323)
TCPOPT_EOL, TCPOPT_NOP, TCPOPT_MSS, TCPOPT_WSCALE = 0, 1, 2, 3
MAX_WSCALE = 14
# RFC 9293: the MSS a sender assumes when the peer's SYN carried none.
DEFAULT_MSS = 536

# Sequence numbers
SEQ_MOD = 1 << 32
SEQ_MASK = SEQ_MOD - 1
SEQ_HALF = 1 << 31

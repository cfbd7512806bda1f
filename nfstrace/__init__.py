"""nfstrace: NFS / ONC-RPC packet-trace analysis.

>>> import nfstrace
>>> t = nfstrace.load("capture.pcap")
>>> t.messages.head()
"""

from nfstrace.errors import NfstraceError
from nfstrace.trace import AnalysisConfig, Trace, load

__version__ = "0.1.0"
__all__ = ["AnalysisConfig", "NfstraceError", "Trace", "__version__", "load"]

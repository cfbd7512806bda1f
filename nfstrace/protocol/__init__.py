"""The protocols' own facts, owned here once for every stage: program,
procedure, operation and status numbers and their names, the fixed sizes of
XDR items, link types and well-known ports.

Each module cites the RFC (or registry) that defines what it holds.  Nothing
here reads bytes: the parsers decode with these numbers, and the matching, the
analysis and the reports name what they show with them, all importing them
from here rather than from a parser (stage 0: it imports nothing of nfstrace
but itself)."""

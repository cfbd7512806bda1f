"""Findings: one module per question, each a function of tables with no I/O."""

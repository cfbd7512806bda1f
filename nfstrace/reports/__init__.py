"""Reports: terminal summary, HTML, exports."""

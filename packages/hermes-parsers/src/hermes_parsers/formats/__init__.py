"""One module per model family; each exposes the ``FormatSpec``s or parser classes it defines."""

"""What every consensus family shares, and nothing family-specific: the estimators' common class and
parameter checks (``base``), the co-association input of the pair methods (``base``, ``pair_kernels``,
``divergences``) and the labels encoding (``encoding``, ``_kernels``). It imports no family."""

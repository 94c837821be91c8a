"""What every consensus family shares, and nothing family-specific: the estimators' common class and
parameter checks (``base``), the co-association input of the pair methods (``base``, ``pair_kernels``,
``divergences``), the labels encoding (``encoding``, ``_kernels``) and a partition's agreement with the base
clusterings (``agreement``). It imports no family."""

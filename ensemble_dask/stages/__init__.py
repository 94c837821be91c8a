"""The stages of a run: each reads its inputs from the run store and writes its output there.

``ingest`` (table -> X, y_true), ``generate`` (base clusterings -> labels), ``coassoc`` (labels -> pairs),
``consensus`` (labels or pairs -> memberships), ``federated`` (BCE across sites), ``report``.
A stage records its parameters and its inputs' hashes, so a finished stage is skipped on a re-run.
"""

"""The vocabulary of the core: the pydantic models, the issue codes, the verification policy, the
lexicon, the worked examples, and the project's data files (``include/``) with their templates."""

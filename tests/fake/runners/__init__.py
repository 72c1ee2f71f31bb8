"""A stand-in `runners` package for the orchestration tests: it behaves badly on purpose, as FAKE_BEHAVIOUR says."""

"""What a night's outputs say: the batch report, the feedback figures, the trend, the audit
sample, the per-document artifacts, one document's trail."""

"""Google Document AI for Airflow, in the Google provider's shape (the provider has none):
``hooks`` (resource names through the client library's path helpers, online/batch calls, the
synchronous wait), ``triggers`` (the deferred wait on the triggerer, via the async hook),
``operators`` (thin ``GoogleCloudBaseOperator`` subclasses; ``deferrable`` defaults to
``[operators] default_deferrable``), ``utils`` (pure helpers: limits, MIME types, request plans,
operation digests, page counting) and ``errors`` (this package's own typed error codes).

Self-contained: it imports Airflow, the Google provider and the Google client libraries, never
the application that uses it (``docverify`` / ``docverify_airflow``; a test checks it), so it can
be lifted into its own distribution as is.

Page limits: the online path counts a PDF's pages itself with ``pypdfium2`` (no parsing of text)
and refuses more than the processor takes before sending anything; the batch path takes page
counts when the caller knows them (``page_counts``) and otherwise leaves the 500-page limit to the
service, whose per-document status then reports the failure.
"""

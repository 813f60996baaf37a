"""Retrieval over the scientist's documents: parse, chunk, embed, index, search, read, verify.

Modules: :mod:`~aisac_core.rag.formats` (file types, docling conversion), :mod:`~aisac_core.rag.pdf` (PDF
reading order from text lines), :mod:`~aisac_core.rag.structure` (sections, taxonomy, metadata),
:mod:`~aisac_core.rag.chunking`, :mod:`~aisac_core.rag.documents` (the parse entry point),
:mod:`~aisac_core.rag.embeddings`, :mod:`~aisac_core.rag.indexer` (incremental indexing and the manifest),
:mod:`~aisac_core.rag.jobs` (background indexing jobs), :mod:`~aisac_core.rag.catalog` (data files listed, not
embedded), :mod:`~aisac_core.rag.search` (hybrid search), :mod:`~aisac_core.rag.sections` (overview and section
reading), :mod:`~aisac_core.rag.verify` (evidence anchor verification), :mod:`~aisac_core.rag.status` (the store's
health), :mod:`~aisac_core.rag.vectorcheck` (the manifest against the vector store); :mod:`~aisac_core.rag.service`
(:class:`RagService`, what the tools call, made of the parts those modules define), :mod:`~aisac_core.rag.results`
(the result types).
"""

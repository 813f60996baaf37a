"""Names of the vector collections every part of aisac shares."""

#: document chunks (dense ``dense`` + sparse ``bm25`` vectors; payload: doc_id, path, sha256, section, page, ...)
CHUNKS = "chunks"
#: embedded user -> assistant pairs of memory sessions (:mod:`aisac_core.memory`)
DIALOGUE = "dialogue"

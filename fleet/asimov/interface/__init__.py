"""The published monitoring interface and the tools a vendor runs without the stack: the
document and JSON Schemas of docs/spec/ generated from the code (document, schemas), the
spec validator (validate) and the conformance kit (conform)."""

"""The offline ``local`` embedding provider (ONNX Runtime; see README.md beside this file)."""

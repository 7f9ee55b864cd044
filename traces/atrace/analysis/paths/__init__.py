"""The critical path: the graph it runs through (graph), the longest paths through it
(longest_path), the path itself and its steps (critical_path), and its tables (tables)."""

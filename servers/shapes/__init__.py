"""Host-facing shapes: presentation-only result shapes (compact hits), lean output schemas, the tools/list
wire form, the tool reference and completions."""

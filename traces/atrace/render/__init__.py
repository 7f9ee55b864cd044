"""What the trace page draws: flame trees, the timeline layout and its windows, the
correlation view, and the page's data computed once and stored beside the trace."""

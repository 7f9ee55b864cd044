"""What several test folders share about a polled fleet."""

# A fixed poll slot: the `polled_fleet` fixture polls the three cycles ending here, so that
# no test straddles a cycle boundary and tests can ask for exact times.
POLLED_CYCLE = 1_795_000_000.0

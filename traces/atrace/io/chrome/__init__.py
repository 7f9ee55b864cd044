"""Chrome / Kineto trace JSON: streamed in batches (jsonstream, batch), timestamps parsed exactly
(timeparse), flow events resolved (flows), read on one or several processes (reader, parallel)
and written back (writer)."""

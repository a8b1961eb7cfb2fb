"""Weight transfer from the trainer to the engines: flat buckets (buckets.py), the rendezvous through Ray's
GCS (store.py) and the broadcast group (group.py). Used by rl (the sender) and policy (the receivers), so
that policy never imports rl."""

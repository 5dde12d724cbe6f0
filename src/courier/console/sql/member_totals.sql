-- Every member's running totals (stored in, taken from), summed over the middleware.
SELECT t.queue_id AS queue, t.sent, t.taken FROM courier_member_counts_v1() t;

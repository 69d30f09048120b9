package loop

// Split is the budget arithmetic of seed 000 (HAProxy's process_runnable_tasks
// after commit 1dfc9bbdc6), pure so that tests can pin it.
//
// A round may run at most depth tasklets. The classes are served in order
// urgent, normal, bulk, and each class is offered a share of the budget that
// is still left when its turn comes:
//
//	urgent: ceil(depth * U / 100)
//	normal: ceil(left * N / (N + B))   left = depth - urgent actually run
//	bulk:   left                       left = depth - urgent - normal actually run
//
// and runs min(offered, queued). Because each offer is computed from what the
// previous classes really consumed, budget a class leaves unused flows down
// to the next class(es) in the proportions of their shares ("whatever is not
// consumed by one class is automatically shared in equal proportions by the
// next one(s)"). Nothing flows back up: if bulk has fewer tasklets than its
// offer, the rest of the round's budget stays unused and the loop polls
// without sleeping, so the next round starts at once with a fresh budget.
//
// Degenerate shares: with N + B == 0 the classes after urgent split what is
// left in halves (normal gets ceil(left/2)). A share of 0 for urgent means
// urgent tasklets only run when the shares are changed; validation should not
// allow it, Split does not second-guess it. Negative inputs count as 0.
func Split(depth int, s Sched, nUrgent, nNormal, nBulk int) (u, n, b int) {
	if depth <= 0 {
		return 0, 0, 0
	}
	nUrgent, nNormal, nBulk = max(nUrgent, 0), max(nNormal, 0), max(nBulk, 0)
	u = min(nUrgent, urgentOffer(depth, s))
	left := depth - u
	n = min(nNormal, normalOffer(left, s))
	left -= n
	b = min(nBulk, left)
	return u, n, b
}

// urgentOffer is what the urgent class is offered of a round's depth.
func urgentOffer(depth int, s Sched) int {
	return min(ceilDiv(depth*max(s.Urgent, 0), 100), depth)
}

// normalOffer is what the normal class is offered of what urgent left.
func normalOffer(left int, s Sched) int {
	sn, sb := max(s.Normal, 0), max(s.Bulk, 0)
	if sn+sb == 0 {
		return ceilDiv(left, 2)
	}
	return ceilDiv(left*sn, sn+sb)
}

func ceilDiv(a, b int) int { return (a + b - 1) / b }

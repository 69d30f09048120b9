package loop

import (
	"unsafe"

	"github.com/spliced-proxy/spliced/internal/ilist"
)

// Class is a tasklet's urgency class (seed 000). The loop runs classes in
// this order, each within its share of the round's budget (see Split).
type Class uint8

const (
	Urgent Class = iota // woken by I/O readiness from the poller
	Normal              // regular work: fired timers' follow-ups, accepted connections
	Bulk                // self-rewaking heavy work (a transfer that used its per-round cap)

	nClasses = 3
)

// String returns the class name used in the API and logs.
func (c Class) String() string {
	switch c {
	case Urgent:
		return "urgent"
	case Normal:
		return "normal"
	case Bulk:
		return "bulk"
	}
	return "invalid"
}

// Tasklet is a unit of work a loop runs. It is embedded in its owner's struct
// (a connection side, an acceptor); Run and Owner are set once, so waking it
// allocates nothing. A tasklet belongs to one loop at a time and is only
// touched from that loop's thread.
type Tasklet struct {
	link ilist.Link[Tasklet] // first: ilist finds the tasklet from it

	Run    func(t *Tasklet)
	Owner  any
	queued uint8 // 0 = idle, else Class+1 of the run queue holding it
}

var _ = [1]struct{}{}[unsafe.Offsetof(Tasklet{}.link)] // link first (ilist)

// Queued reports whether t waits in a run queue.
func (t *Tasklet) Queued() bool { return t.queued != 0 }

// QueuedIn reports whether t waits in the run queue of class c. A
// connection whose transfer was demoted to Bulk (Loop.Demote) asks it of
// its source's tasklet so that a run of another tasklet (the other side's,
// woken Urgent by its own fd) does not read that source again in the same
// round: the Bulk run will.
func (t *Tasklet) QueuedIn(c Class) bool { return t.queued == uint8(c)+1 }

// runq is an intrusive doubly-linked FIFO of tasklets of one class.
type runq struct {
	l ilist.List[Tasklet]
	n int
}

func (q *runq) push(t *Tasklet) {
	q.l.PushBack(&t.link)
	q.n++
}

func (q *runq) pop() *Tasklet {
	t := q.l.PopFront()
	if t != nil {
		t.queued = 0
		q.n--
	}
	return t
}

func (q *runq) remove(t *Tasklet) {
	q.l.Remove(&t.link)
	t.queued = 0
	q.n--
}

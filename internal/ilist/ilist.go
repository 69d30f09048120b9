// Package ilist is the intrusive doubly linked list of the data plane: the
// tasklet run queues of core/loop, the waiter FIFOs and mailboxes of
// core/balance's queue, and core/proxy's lists of live connections and
// idle server connections. An element embeds a Link, so linking and unlinking
// allocate nothing and unlinking from the middle is O(1) (HAProxy's
// struct list and LIST_DELETE, which the run queues and queue.c use).
//
// The list is generic over the element type and calls no method of it: the
// functions are small enough to be inlined into their callers, with no
// interface or dictionary call on the hot path. A Link points back to its
// element (elem): what C's container_of computes from the link's offset,
// for 8 bytes per element.
//
// A List and its elements' Links are not safe for concurrent use: the
// owner of the list serialises access (a loop's thread for run queues, the
// queue or mailbox lock for waiters).
package ilist

// Link is embedded in an element to put it in one List at a time. Its zero
// value is unlinked.
type Link[T any] struct {
	prev, next *Link[T]
	elem       *T
}

// Next returns the element after the one lk links, nil at the end of its
// list (or when it is not linked).
func (lk *Link[T]) Next() *T {
	if lk.next == nil {
		return nil
	}
	return lk.next.elem
}

// List is a FIFO of elements that embed a Link. The zero value is empty.
type List[T any] struct {
	head, tail *Link[T]
}

// Empty reports whether the list has no element.
func (l *List[T]) Empty() bool { return l.head == nil }

// Front returns the first element, nil when the list is empty.
func (l *List[T]) Front() *T {
	if l.head == nil {
		return nil
	}
	return l.head.elem
}

// PushBack links e, whose Link is lk, at the end of the list. lk must not
// be linked.
func (l *List[T]) PushBack(e *T, lk *Link[T]) {
	lk.prev, lk.next, lk.elem = l.tail, nil, e
	if l.tail != nil {
		l.tail.next = lk
	} else {
		l.head = lk
	}
	l.tail = lk
}

// PushFront links e, whose Link is lk, at the front of the list. lk must
// not be linked.
func (l *List[T]) PushFront(e *T, lk *Link[T]) {
	lk.prev, lk.next, lk.elem = nil, l.head, e
	if l.head != nil {
		l.head.prev = lk
	} else {
		l.tail = lk
	}
	l.head = lk
}

// InsertBefore links e, whose Link is lk, just before the element whose
// Link is at, which must be in the list. lk must not be linked.
func (l *List[T]) InsertBefore(e *T, lk, at *Link[T]) {
	lk.prev, lk.next, lk.elem = at.prev, at, e
	if at.prev != nil {
		at.prev.next = lk
	} else {
		l.head = lk
	}
	at.prev = lk
}

// Remove unlinks the element whose Link is lk, which must be in the list.
func (l *List[T]) Remove(lk *Link[T]) {
	if lk.prev != nil {
		lk.prev.next = lk.next
	} else {
		l.head = lk.next
	}
	if lk.next != nil {
		lk.next.prev = lk.prev
	} else {
		l.tail = lk.prev
	}
	lk.prev, lk.next = nil, nil
}

// PopFront unlinks and returns the first element, nil when the list is
// empty.
func (l *List[T]) PopFront() *T {
	lk := l.head
	if lk == nil {
		return nil
	}
	// Remove, knowing that lk.prev is nil: cheap enough for the run
	// queue's pop to stay inlinable.
	l.head = lk.next
	if lk.next != nil {
		lk.next.prev = nil
	} else {
		l.tail = nil
	}
	lk.next = nil
	return lk.elem
}

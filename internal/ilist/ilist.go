// Package ilist is the intrusive doubly linked list of the data plane: the
// tasklet run queues of core/loop, the waiter FIFOs and mailboxes of
// core/balance's queue, and core/proxy's lists of live connections and
// idle server connections. An element embeds a Link, so linking and unlinking
// allocate nothing and unlinking from the middle is O(1) (HAProxy's
// struct list and LIST_DELETE, which the run queues and queue.c use).
//
// The list is generic over the element type and calls no method of it: the
// functions are small enough to be inlined into their callers, with no
// interface or dictionary call on the hot path.
//
// The Link is the FIRST field of its element, and the list finds the
// element from its Link by converting the pointer (elem: C's container_of
// with an offset of 0), as HAProxy's LIST_ELEM does. A back-pointer in the
// Link would cost 8 bytes per link, and the data plane's connection
// objects carry several (a tcp tunnel: its two sides' tasklets, its
// queue waiter and its own): enough to push them into a larger malloc
// size class (core/proxy's TestConnectionObjectsKeepTheirSizeClass). Each
// element type asserts the offset at compile time, next to its
// declaration (a constant index out of the range of a one-element array
// does not compile):
//
//	var _ = [1]struct{}{}[unsafe.Offsetof(Tasklet{}.link)] // Link first: ilist
//
// The conversion stays inside the element's allocation (the Link is the
// start of a whole T), which is what -race's checkptr instrumentation
// verifies.
//
// A List and its elements' Links are not safe for concurrent use: the
// owner of the list serialises access (a loop's thread for run queues, the
// queue or mailbox lock for waiters).
package ilist

import "unsafe"

// Link is the first field of an element, to put it in one List at a time.
// Its zero value is unlinked.
type Link[T any] struct {
	prev, next *Link[T]
}

// elem is the element whose Link is lk (its first field).
func elem[T any](lk *Link[T]) *T { return (*T)(unsafe.Pointer(lk)) }

// Next returns the element after the one lk links, nil at the end of its
// list (or when it is not linked).
func (lk *Link[T]) Next() *T {
	if lk.next == nil {
		return nil
	}
	return elem(lk.next)
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
	return elem(l.head)
}

// PushBack links the element whose Link is lk at the end of the list. lk
// must not be linked.
func (l *List[T]) PushBack(lk *Link[T]) {
	lk.prev, lk.next = l.tail, nil
	if l.tail != nil {
		l.tail.next = lk
	} else {
		l.head = lk
	}
	l.tail = lk
}

// PushFront links the element whose Link is lk at the front of the list.
// lk must not be linked.
func (l *List[T]) PushFront(lk *Link[T]) {
	lk.prev, lk.next = nil, l.head
	if l.head != nil {
		l.head.prev = lk
	} else {
		l.tail = lk
	}
	l.head = lk
}

// InsertBefore links the element whose Link is lk just before the element
// whose Link is at, which must be in the list. lk must not be linked.
func (l *List[T]) InsertBefore(lk, at *Link[T]) {
	lk.prev, lk.next = at.prev, at
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
	return elem(lk)
}

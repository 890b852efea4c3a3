// Package ring is a bounded, lock-free, multi-producer single-consumer queue
// of uint64 values: the path by which new timeouts reach a shard's worker.
//
// The algorithm is Dmitry Vyukov's bounded queue with one sequence number per
// slot (https://www.1024cores.net/home/lock-free-algorithms/queues/bounded-mpmc-queue),
// specialised to a single consumer so that the head needs no atomic update.
//
// Every slot carries a sequence number seq. For the slot at position pos
// (pos counts pushes from 0, the slot is pos & mask):
//
//	seq == pos         the slot is free for the producer that claims pos;
//	seq == pos+1       the value for pos is published, the consumer may read it;
//	seq == pos+size    the consumer released it for the producer of pos+size.
//
// Ownership: tail is shared by producers (CAS); head is a plain field owned
// by the single consumer; a slot's val is written only by the producer that
// claimed its position and read only by the consumer after it saw the
// publishing seq.
//
// Push and TryPop never block and never allocate. A full ring makes Push
// return false: the caller decides what the slow path is.
package ring

import (
	"fmt"
	"math/bits"
	"sync/atomic"
	"unsafe"
)

// cacheLineSize is the padding unit. 64 bytes is the line on amd64 and most
// arm64 parts; the adjacent-line prefetcher on Intel pulls pairs, but padding
// to 128 would double the ring header for a gain we have not measured.
const cacheLineSize = 64

// MaxSize is the largest capacity New accepts.
const MaxSize = 1 << 30

type slot struct {
	seq atomic.Uint64
	val uint64 // written by the claiming producer before seq publishes it
}

// Ring is a bounded MPSC queue of uint64 values. Any number of goroutines may
// call Push concurrently; only one goroutine at a time may call the consumer
// methods (TryPop, Published, Len). A Ring must be created with New and must
// not be copied after first use.
type Ring struct {
	_ [cacheLineSize]byte
	// tail is the next position producers will claim. Producers CAS it.
	tail atomic.Uint64
	_    [cacheLineSize - 8]byte
	consumer
	_ [cacheLineSize - unsafe.Sizeof(consumer{})%cacheLineSize]byte
}

// consumer holds the fields the consumer reads on every pop, on a line of
// their own.
type consumer struct {
	// head is the next position the consumer will read. Consumer only.
	head  uint64
	mask  uint64 // immutable after New
	slots []slot // immutable after New
}

// New returns a ring with room for size values, rounded up to a power of
// two and to at least 2: with one slot, "published for position p" and
// "free for position p+1" would be the same sequence number. It returns an
// error if size is below 1 or above MaxSize.
func New(size int) (*Ring, error) {
	if size < 1 || size > MaxSize {
		return nil, fmt.Errorf("ring: size %d out of range [1, %d]", size, MaxSize)
	}
	n := max(uint64(1)<<bits.Len64(uint64(size-1)), 2)
	r := &Ring{consumer: consumer{mask: n - 1, slots: make([]slot, n)}}
	for i := range r.slots {
		r.slots[i].seq.Store(uint64(i))
	}
	return r, nil
}

// Cap returns the ring's capacity.
func (r *Ring) Cap() int { return len(r.slots) }

// Claimed returns how many positions producers have claimed since New: the
// number of successful and in-progress pushes. Any goroutine may call it.
func (r *Ring) Claimed() uint64 { return r.tail.Load() }

// Len returns the number of positions claimed by producers and not yet
// consumed, including claimed ones not yet published. Consumer only.
func (r *Ring) Len() int { return int(r.tail.Load() - r.head) }

// Push appends v and reports whether there was room. It is safe for
// concurrent use by many goroutines.
func (r *Ring) Push(v uint64) bool {
	pos := r.tail.Load()
	for {
		s := &r.slots[pos&r.mask]
		seq := s.seq.Load()
		switch dif := int64(seq - pos); {
		case dif == 0:
			// The slot is free for pos. Claim pos; a failed CAS means
			// another producer took it, so retry at the newer tail.
			if r.tail.CompareAndSwap(pos, pos+1) {
				// Why this order: (1) the CAS made pos ours alone;
				// (2) val is written before seq, and seq is stored with
				// release semantics (all Go atomics are sequentially
				// consistent), so a consumer that loads seq == pos+1 also
				// sees val. The consumer mirrors this in TryPop.
				s.val = v
				s.seq.Store(pos + 1)
				return true
			}
			pos = r.tail.Load()
		case dif < 0:
			// The slot still holds the value from one lap ago: full.
			return false
		default:
			// Another producer claimed pos and moved on; catch up.
			pos = r.tail.Load()
		}
	}
}

// Published returns how many values, up to limit, are ready to be popped in
// order from the head. Every value it counts was pushed before Published
// returned; the consumer uses this to read a clock that is later than every
// push in a batch. Consumer only.
func (r *Ring) Published(limit int) int {
	h := r.head
	n := 0
	for n < limit && r.slots[(h+uint64(n))&r.mask].seq.Load() == h+uint64(n)+1 {
		n++
	}
	return n
}

// TryPop removes and returns the value at the head, or reports false if the
// head is empty or claimed by a producer that has not yet published it.
// Values are popped in the order their positions were claimed. Consumer only.
func (r *Ring) TryPop() (uint64, bool) {
	h := r.head
	s := &r.slots[h&r.mask]
	// Mirror of Push: seq is loaded before val, so seeing pos+1 guarantees
	// the producer's val store is visible.
	if s.seq.Load() != h+1 {
		return 0, false
	}
	v := s.val
	// Release the slot for the producer one lap later, after reading val.
	s.seq.Store(h + r.mask + 1)
	r.head = h + 1
	return v, true
}

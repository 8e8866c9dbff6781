/* SPDX-License-Identifier: GPL-2.0 OR MIT */
/* BPF-side helpers for the ring buffer every probe object shares. */
#ifndef PTG_RINGBUF_BPF_H
#define PTG_RINGBUF_BPF_H

/*
 * A wakeup is an interrupt on the consumer's CPU (an IPI, a VM exit in a
 * guest) for each event: at a million events a second that costs the target
 * more than the probe itself. The loader polls with a timeout anyway
 * (tracer__poll reads on timeout), so wake it only once the buffer is a
 * quarter full.
 */
static __always_inline __u64 ptg_wakeup_flags(void *ringbuf)
{
	__u64 avail = bpf_ringbuf_query(ringbuf, BPF_RB_AVAIL_DATA);
	__u64 size = bpf_ringbuf_query(ringbuf, BPF_RB_RING_SIZE);

	return avail >= size / 4 ? BPF_RB_FORCE_WAKEUP : BPF_RB_NO_WAKEUP;
}

/*
 * The same for a probe on the hot path of every call: the two queries cost
 * ~17 ns of its ~430, so ask them every PTG_WAKEUP_EVERY-th event only, as
 * counted in the caller's per-CPU counter. That many events are a small part
 * of a quarter of any buffer.
 */
#define PTG_WAKEUP_EVERY 64

static __always_inline __u64 ptg_wakeup_flags_every(void *ringbuf, __u64 *count)
{
	if ((*count)++ % PTG_WAKEUP_EVERY)
		return BPF_RB_NO_WAKEUP;
	return ptg_wakeup_flags(ringbuf);
}

#endif /* PTG_RINGBUF_BPF_H */

// SPDX-License-Identifier: MIT
/* A CUPTI agent's ring of CUDA calls (cuda_ring.h). */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>

#include "cuda/cuda_ring.h"

#define RING_LEN                                                                                   \
	(PTG_CUPTI_CALLS_OFF + (uint64_t)PTG_CUPTI_CALLS_NRECS * sizeof(struct ptg_cupti_call_rec))

struct cuda_ring {
	struct ptg_cupti_call_ring *hdr;
	struct ptg_cupti_call_rec *recs;
	uint64_t tail; /* ours: the shared one is only written */
};

/*
 * The target made the memfd: only one whose size it can no longer change
 * is mapped, or a shrink would fault us (SIGBUS) as we read it.
 */
static int check_fd(int fd, uint64_t size)
{
	int seals = fcntl(fd, F_GET_SEALS);
	struct stat st;

	if (seals < 0 || (seals & (F_SEAL_SHRINK | F_SEAL_GROW)) != (F_SEAL_SHRINK | F_SEAL_GROW))
		return -EPROTO;
	if (fstat(fd, &st) || !S_ISREG(st.st_mode) || (uint64_t)st.st_size != RING_LEN ||
	    size != RING_LEN)
		return -EPROTO;
	return 0;
}

int cuda_ring__open(int fd, uint64_t size, struct cuda_ring **out)
{
	struct cuda_ring *r;
	void *p;
	int err = check_fd(fd, size);

	if (err)
		return err;
	p = mmap(NULL, RING_LEN, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (p == MAP_FAILED)
		return -errno;
	r = calloc(1, sizeof(*r));
	if (!r) {
		munmap(p, RING_LEN);
		return -ENOMEM;
	}
	r->hdr = p;
	r->recs = (struct ptg_cupti_call_rec *)((uint8_t *)p + PTG_CUPTI_CALLS_OFF);
	/* the header as the agent set it up: its geometry is ours anyway, by its size */
	if (r->hdr->magic != PTG_CUPTI_CALLS_MAGIC || r->hdr->rec_size != sizeof(*r->recs) ||
	    r->hdr->ncalls != PTG_CUPTI_NCALLS || r->hdr->nrecs != PTG_CUPTI_CALLS_NRECS) {
		cuda_ring__free(r);
		return -EPROTO;
	}
	r->tail = __atomic_load_n(&r->hdr->tail, __ATOMIC_ACQUIRE);
	*out = r;
	return 0;
}

bool cuda_ring__peek(const struct cuda_ring *r, struct ptg_cupti_call_rec *rec)
{
	const struct ptg_cupti_call_rec *p = &r->recs[r->tail & (PTG_CUPTI_CALLS_NRECS - 1)];

	if (__atomic_load_n(&p->seq, __ATOMIC_ACQUIRE) != (uint32_t)(r->tail + 1))
		return false;
	/* a copy: the target may write the slot again, and what was checked must stay */
	memcpy(rec, p, sizeof(*rec));
	return true;
}

void cuda_ring__consume(struct cuda_ring *r)
{
	r->tail++;
	__atomic_store_n(&r->hdr->tail, r->tail, __ATOMIC_RELEASE);
}

uint64_t cuda_ring__dropped(const struct cuda_ring *r)
{
	return __atomic_load_n(&r->hdr->dropped, __ATOMIC_RELAXED);
}

void cuda_ring__free(struct cuda_ring *r)
{
	if (!r)
		return;
	munmap(r->hdr, RING_LEN);
	free(r);
}

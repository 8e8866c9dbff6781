// SPDX-License-Identifier: MIT
/*
 * Writes fuzz/corpus/agent_proto/: byte streams as the CUPTI agent sends
 * them, built with the agent's own protocol and record structs (so the
 * seeds in the tree have CUDA 13's record sizes). Built by hand where
 * CUPTI's headers are:
 *   cc -Iagent -I/usr/local/cuda/include fuzz/gen_agent_proto.c -o gen
 *   ./gen fuzz/corpus/agent_proto
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "ptg_cupti_proto.h"
#include "ptg_cupti_records.h"

static void msg(FILE *f, uint32_t type, const void *head, uint32_t hlen, const char *text)
{
	uint32_t tlen = text ? (uint32_t)strlen(text) : 0;
	struct ptg_cupti_msg_hdr h = {type, hlen + tlen};

	fwrite(&h, sizeof(h), 1, f);
	fwrite(head, hlen, 1, f);
	fwrite(text, tlen, 1, f);
}

static void hello(FILE *f)
{
	struct ptg_cupti_hello h = {PTG_CUPTI_PROTO_VERSION, 42, CUPTI_API_VERSION,
				    CUPTI_API_VERSION};

	msg(f, PTG_CUPTI_MSG_HELLO, &h, sizeof(h), NULL);
}

static void status(FILE *f, int state, int result, const char *text)
{
	struct ptg_cupti_status s = {state, result};

	msg(f, PTG_CUPTI_MSG_STATUS, &s, sizeof(s), text);
}

static void clock_pair(FILE *f, uint64_t cupti_ns, uint64_t mono_ns)
{
	struct ptg_cupti_clock c = {cupti_ns, mono_ns};

	msg(f, PTG_CUPTI_MSG_CLOCK, &c, sizeof(c), NULL);
}

static void names(FILE *f)
{
	struct ptg_cupti_kernel_name k1 = {0x1000}, k2 = {0x2000};
	struct ptg_cupti_api_name rt = {CUPTI_CB_DOMAIN_RUNTIME_API, 211};
	struct ptg_cupti_api_name drv = {CUPTI_CB_DOMAIN_DRIVER_API, 307};

	msg(f, PTG_CUPTI_MSG_KERNEL_NAME, &k1, sizeof(k1), "_Z6kernelPfi");
	msg(f, PTG_CUPTI_MSG_KERNEL_NAME, &k2, sizeof(k2), "volta_sgemm_128x64_nn");
	msg(f, PTG_CUPTI_MSG_API_NAME, &rt, sizeof(rt), "cudaLaunchKernel_v7000");
	msg(f, PTG_CUPTI_MSG_API_NAME, &drv, sizeof(drv), "cuLaunchKernel");
}

/* One record of each kind the loader decodes, as CUPTI fills them. */
static void buffer(FILE *f)
{
	static uint8_t b[4096];
	ptg_cupti_kernel k;
	ptg_cupti_memcpy mc;
	ptg_cupti_memset ms;
	ptg_cupti_sync s;
	ptg_cupti_api a;
	uint32_t n = 0;

	memset(&k, 0, sizeof(k));
	k.kind = CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL;
	k.start = 1500000000;
	k.end = 1500020000;
	k.deviceId = 0;
	k.contextId = 1;
	k.streamId = 7;
	k.gridX = k.gridY = k.gridZ = 1;
	k.blockX = 128;
	k.blockY = k.blockZ = 1;
	k.correlationId = 1;
	k.name = (const char *)0x1000;
	memcpy(b + n, &k, sizeof(k));
	n += sizeof(k);
	memset(&mc, 0, sizeof(mc));
	mc.kind = CUPTI_ACTIVITY_KIND_MEMCPY;
	mc.copyKind = CUPTI_ACTIVITY_MEMCPY_KIND_HTOD;
	mc.srcKind = CUPTI_ACTIVITY_MEMORY_KIND_PAGEABLE;
	mc.dstKind = CUPTI_ACTIVITY_MEMORY_KIND_DEVICE;
	mc.bytes = 4096;
	mc.start = 1400000000;
	mc.end = 1400001000;
	mc.contextId = 1;
	mc.streamId = 7;
	mc.correlationId = 2;
	memcpy(b + n, &mc, sizeof(mc));
	n += sizeof(mc);
	memset(&ms, 0, sizeof(ms));
	ms.kind = CUPTI_ACTIVITY_KIND_MEMSET;
	ms.memoryKind = CUPTI_ACTIVITY_MEMORY_KIND_DEVICE;
	ms.bytes = 256;
	ms.start = 1600000000;
	ms.end = 1600000100;
	ms.contextId = 1;
	ms.correlationId = 3;
	memcpy(b + n, &ms, sizeof(ms));
	n += sizeof(ms);
	memset(&s, 0, sizeof(s));
	s.kind = CUPTI_ACTIVITY_KIND_SYNCHRONIZATION;
	s.type = CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_STREAM_SYNCHRONIZE;
	s.start = 1700000000;
	s.end = 1700500000;
	s.contextId = 1;
	s.streamId = 7;
	s.cudaEventId = CUPTI_SYNCHRONIZATION_INVALID_VALUE;
	s.correlationId = 4;
	memcpy(b + n, &s, sizeof(s));
	n += sizeof(s);
	memset(&a, 0, sizeof(a));
	a.kind = CUPTI_ACTIVITY_KIND_RUNTIME;
	a.cbid = 211;
	a.start = 1490000000;
	a.end = 1490002000;
	a.threadId = 777;
	a.correlationId = 1;
	memcpy(b + n, &a, sizeof(a));
	n += sizeof(a);
	a.kind = CUPTI_ACTIVITY_KIND_DRIVER;
	a.cbid = 307;
	a.threadId = 778;
	memcpy(b + n, &a, sizeof(a));
	n += sizeof(a);
	msg(f, PTG_CUPTI_MSG_BUFFER, b, n, NULL);
}

static void end(FILE *f)
{
	struct ptg_cupti_dropped dr = {3, 1};

	msg(f, PTG_CUPTI_MSG_DROPPED, &dr, sizeof(dr), NULL);
	msg(f, PTG_CUPTI_MSG_END, "", 0, NULL);
}

static int write_seed(const char *dir, const char *name, int which)
{
	char path[4096];
	FILE *f;

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	f = fopen(path, "wxe");
	if (!f) {
		fprintf(stderr, "gen_agent_proto: %s: %s\n", path, strerror(errno));
		return 1;
	}
	hello(f);
	switch (which) {
	case 0: /* a whole session */
		status(f, PTG_CUPTI_ACTIVE, 0, "recording GPU activity");
		clock_pair(f, 1000000000, 5000000);
		names(f);
		buffer(f);
		clock_pair(f, 2000000000, 1005001000);
		end(f);
		break;
	case 1: /* records before any name or clock */
		buffer(f);
		break;
	case 2: /* CUPTI taken by another client */
		status(f, PTG_CUPTI_BUSY, CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED,
		       "cuptiSubscribe");
		end(f);
		break;
	}
	return fclose(f) ? 1 : 0;
}

int main(int argc, char **argv)
{
	if (argc != 2) {
		fprintf(stderr, "usage: gen_agent_proto DIR\n");
		return 2;
	}
	return write_seed(argv[1], "session.bin", 0) | write_seed(argv[1], "no_names.bin", 1) |
	       write_seed(argv[1], "busy.bin", 2);
}

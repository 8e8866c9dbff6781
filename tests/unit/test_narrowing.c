// SPDX-License-Identifier: MIT
/*
 * Numbers of a hostile file that do not fit the field they go into are kept
 * apart, never cut down into someone else's value: what -Wconversion found in
 * the rooms that read such files. A Kineto event of no known category with
 * pid 4294967297 was kept as pid 1 (another process's row, for sorting and for
 * cutting one process out), and a GPU row's "device": 4294967301 became
 * device 5.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "import/kineto.h"
#include "test.h"
#include "trace/trace.h"

static const char json[] =
    "{\"traceEvents\": [\n"
    "  {\"ph\": \"X\", \"cat\": \"mystery\", \"name\": \"big\", \"pid\": 4294967297,"
    "   \"tid\": 4294967296, \"ts\": 1, \"dur\": 1},\n"
    "  {\"ph\": \"X\", \"cat\": \"mystery\", \"name\": \"low\", \"pid\": -2147483649,"
    "   \"tid\": 12, \"ts\": 2, \"dur\": 1},\n"
    /* the int32 view of 32 bits, as Chrome tools write them: kept */
    "  {\"ph\": \"X\", \"cat\": \"mystery\", \"name\": \"neg\", \"pid\": -1,"
    "   \"tid\": -2147483648, \"ts\": 3, \"dur\": 1},\n"
    "  {\"ph\": \"X\", \"cat\": \"kernel\", \"name\": \"k_big\", \"pid\": 3, \"tid\": 7,"
    "   \"ts\": 4, \"dur\": 1, \"args\": {\"device\": 4294967301, \"stream\": 7}},\n"
    "  {\"ph\": \"X\", \"cat\": \"kernel\", \"name\": \"k_neg\", \"pid\": 3, \"tid\": 7,"
    "   \"ts\": 6, \"dur\": 1, \"args\": {\"device\": -1, \"stream\": 7}},\n"
    "  {\"ph\": \"X\", \"cat\": \"kernel\", \"name\": \"k_two\", \"pid\": 3, \"tid\": 7,"
    "   \"ts\": 8, \"dur\": 1, \"args\": {\"device\": 2, \"stream\": 7}}\n"
    " ]}\n";

struct want {
	const char *name;
	uint16_t kind;
	uint32_t pid, tid, device;
	bool seen;
};

static struct want wants[] = {
    /* past 32 bits: no pid or tid, as for a string one; the JSON in args keeps them */
    {"big", PTG_REC_EVENT, 0, 0, 0},
    {"low", PTG_REC_EVENT, 0, 12, 0},
    {"neg", PTG_REC_EVENT, 4294967295u, 2147483648u, 0},
    /* past 32 bits: the row's pid, Kineto's device number of GPU rows */
    {"k_big", PTG_REC_GPU_KERNEL, 3, 7, 3},
    {"k_neg", PTG_REC_GPU_KERNEL, 3, 7, 4294967295u},
    {"k_two", PTG_REC_GPU_KERNEL, 3, 7, 2},
};

static void check_record(struct trace_reader *r, const struct ptg_record *rec)
{
	const struct ptg_sym *s = trace_reader__sym(r, rec->sym);
	size_t i;

	for (i = 0; s && i < sizeof(wants) / sizeof(wants[0]); i++) {
		struct want *w = &wants[i];

		if (strcmp(s->name, w->name))
			continue;
		ASSERT_TRUE(!w->seen, w->name);
		w->seen = true;
		ASSERT_EQ(rec->kind, w->kind, w->name);
		ASSERT_EQ(rec->pid, w->pid, w->name);
		ASSERT_EQ(rec->tid, w->tid, w->name);
		if (w->kind == PTG_REC_GPU_KERNEL)
			ASSERT_EQ(rec->device, w->device, w->name);
		return;
	}
	ASSERT_TRUE(false, "a record of the JSON above");
}

static void test_kineto_ids(const char *path)
{
	struct kineto_stats st = {};
	struct trace_reader *r;
	struct ptg_record rec;
	char err[256];
	size_t i;
	int ret;

	if (!ASSERT_EQ(kineto_import_buf(json, sizeof(json) - 1, "ids.json", path, &st), 0,
		       "import"))
		return;
	ASSERT_EQ(st.unknown, 3, "the mystery rows: unknown");
	if (!ASSERT_EQ(trace_reader__open(path, &r, err, sizeof(err)), 0, "open"))
		return;
	while ((ret = trace_reader__next(r, &rec)) == 1)
		check_record(r, &rec);
	ASSERT_EQ(ret, 0, "read to the end");
	for (i = 0; i < sizeof(wants) / sizeof(wants[0]); i++)
		ASSERT_TRUE(wants[i].seen, wants[i].name);
	trace_reader__close(r);
}

int main(void)
{
	char path[] = "/tmp/test_narrowing_XXXXXX";
	int fd = mkstemp(path);

	if (!ASSERT_TRUE(fd >= 0, "mkstemp"))
		return TEST_DONE();
	close(fd);
	test_kineto_ids(path);
	unlink(path);
	return TEST_DONE();
}

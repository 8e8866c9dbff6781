// SPDX-License-Identifier: MIT
/* CPython 3.11 location tables -> lines, on a table built by hand from Objects/locations.md. */
#include <stdint.h>

#include "sample/sample.h"
#include "test.h"

/*
 * firstlineno 10. Each entry: header 1CCCCLLL (code C, L + 1 code units of
 * 2 bytes), then operands.
 */
static const uint8_t table[] = {
    0xe8, 0x02,	      /* 13 no columns, 1 unit, line delta +1 (svarint 2): [0, 2) line 11 */
    0xd1, 0x04, 0x08, /* 10 one line, 2 units, delta 0: [2, 6) line 11 */
    0xd8, 0x00, 0x05, /* 11 one line, 1 unit, delta +1: [6, 8) line 12 */
    0xf8,	      /* 15 no location, 1 unit: [8, 10) none */
    0xf0, 0x07, 0x00, 0x01, 0x02, /* 14 long, 1 unit, delta -3 (svarint 7): [10, 12) line 9 */
    0x82, 0x11,			  /* 0 short, 3 units, same line: [12, 18) line 9 */
    0xe8, 0x48, 0x03, /* 13, 1 unit, delta +100 (svarint 200 in two 6-bit groups): line 109 */
};

int main(void)
{
	static const struct {
		int addr, line;
	} cases[] = {
	    {-2, 10}, /* before the first instruction: the def line */
	    {0, 11},  {2, 11}, {4, 11}, {6, 12},   {8, -1},
	    {10, 9},  {12, 9}, {16, 9}, {18, 109}, {20, -1}, /* past the end */
	};

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
		ASSERT_EQ(py_linetable_line(table, sizeof(table), 10, cases[i].addr), cases[i].line,
			  "line of address");
	/* a table cut inside an operand does not read past its end */
	ASSERT_EQ(py_linetable_line(table, 1, 10, 0), 10, "cut table");
	ASSERT_EQ(py_linetable_line(table, 0, 10, 0), -1, "empty table");
	return TEST_DONE();
}

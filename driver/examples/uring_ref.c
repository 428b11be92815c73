/*
 * spintune-uring-ref: a user-space reference driver. An io_uring engine
 * doing O_DIRECT reads and writes on a file that waits for each completion
 * through the spintune helpers (wait.h): spin on the completion queue up to
 * the entry's threshold, then block in the kernel (io_uring_wait_cqe), with
 * the table read from the agent's shared-memory sink (shm.h).
 *
 *   measure mode: spin on every completion (exact completion times) and
 *     block on a share of them, write the samples CSV and a platform JSON
 *     estimated on this machine;
 *   compare mode: table, block and spin take turns request by request (an
 *     interleaved comparison that disk drift cannot bias);
 *   table / spin / block modes: run the workload and report per opcode the
 *     mean latency and CPU time (thread CPU clock) per request, both from
 *     the return of io_uring_submit() (the wait; the submission's own time,
 *     the same under every wait, is printed apart as SUBMIT/REQ); with
 *     --report FILE also as an outcome report (docs/verification.md: per
 *     key the request count and the sums of CPU ns, latency ns, their
 *     squares and products), what `spintune verify` compares with the
 *     table's predictions. An entry with an A/B trial (format 3) sends a
 *     share of its commands to the incumbent's wait (spintune_ab_pick());
 *     the table's report has those as rows with "arm": "incumbent".
 *
 * Opcodes follow the block layer: 0 = read (REQ_OP_READ), 1 = write.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <liburing.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "spintune/shm.h"
#include "spintune/wait.h"

#define DEVICE_NAME "uring0"
#define MAX_SIZES 8

struct options {
	const char *file;
	const char *mode;
	const char *shm;
	const char *csv;
	const char *platform;
	const char *report;
	unsigned long long file_mib;
	unsigned long ops;
	unsigned sizes[MAX_SIZES];
	int nsizes;
};

struct opstats {
	unsigned long count;
	double latency_ns;
	double cpu_ns;
	double latency_sq, cpu_sq, cpu_latency; /* for the outcome report */
	double submit_ns; /* io_uring_submit() before the wait, not in latency_ns */
	unsigned long spin_hits, irq_fallbacks;
};

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static uint64_t cpu_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static void usage(FILE *out)
{
	fprintf(out,
		"usage: spintune-uring-ref --mode measure|table|spin|block|compare [options]\n"
		"  --file PATH       data file (O_DIRECT), created if missing\n"
		"  --file-mib N      its size in MiB (default 64)\n"
		"  --ops N           requests to run (default 20000)\n"
		"  --sizes A,B,...   request sizes in bytes, multiples of 4096 (default 4096,65536)\n"
		"  --shm NAME        table mode: the agent's shm sink object (shm:NAME)\n"
		"  --csv OUT         measure mode: completion samples CSV\n"
		"  --platform OUT    measure mode: platform costs JSON of this machine\n"
		"  --report OUT      outcome report JSON (docs/verification.md); compare mode\n"
		"                    (table, block and spin in turns): OUT-table.json, -block, -spin\n"
		"Examples:\n"
		"  spintune-uring-ref --mode measure --csv s.csv --platform p.json\n"
		"  spintune-uring-ref --mode table --shm spintune-uring0\n"
		"Exit codes: 0 ok, 1 runtime failure, 2 usage, 77 io_uring unavailable.\n");
}

static int parse(int argc, char **argv, struct options *o)
{
	static const struct option longopts[] = {
		{"file", required_argument, 0, 'f'},    {"mode", required_argument, 0, 'm'},
		{"shm", required_argument, 0, 's'},     {"csv", required_argument, 0, 'c'},
		{"platform", required_argument, 0, 'p'}, {"file-mib", required_argument, 0, 'b'},
		{"ops", required_argument, 0, 'n'},     {"sizes", required_argument, 0, 'z'},
		{"report", required_argument, 0, 'r'},  {"help", no_argument, 0, 'h'},
		{0, 0, 0, 0}};
	int c;

	o->file = "/var/tmp/spintune-uring-ref.dat";
	o->file_mib = 64;
	o->ops = 20000;
	o->sizes[0] = 4096;
	o->sizes[1] = 65536;
	o->nsizes = 2;
	while ((c = getopt_long(argc, argv, "", longopts, 0)) != -1) {
		char *end, *tok;

		switch (c) {
		case 'f': o->file = optarg; break;
		case 'm': o->mode = optarg; break;
		case 's': o->shm = optarg; break;
		case 'c': o->csv = optarg; break;
		case 'p': o->platform = optarg; break;
		case 'r': o->report = optarg; break;
		case 'b': o->file_mib = strtoull(optarg, &end, 10); if (*end || !o->file_mib) return -1; break;
		case 'n': o->ops = strtoul(optarg, &end, 10); if (*end || !o->ops) return -1; break;
		case 'z':
			o->nsizes = 0;
			for (tok = strtok(optarg, ","); tok && o->nsizes < MAX_SIZES; tok = strtok(0, ",")) {
				const unsigned long v = strtoul(tok, &end, 10);

				if (*end || !v || v % 4096 || v > (1u << 20))
					return -1;
				o->sizes[o->nsizes++] = (unsigned)v;
			}
			if (!o->nsizes)
				return -1;
			break;
		case 'h': usage(stdout); exit(0);
		default: return -1;
		}
	}
	if (!o->mode || (strcmp(o->mode, "measure") && strcmp(o->mode, "table") &&
			 strcmp(o->mode, "spin") && strcmp(o->mode, "block") &&
			 strcmp(o->mode, "compare")))
		return -1;
	if ((!strcmp(o->mode, "table") || !strcmp(o->mode, "compare")) && !o->shm)
		return -1;
	if (!strcmp(o->mode, "measure") && (!o->csv || !o->platform))
		return -1;
	return 0;
}

/* Creates the file with real data (reads of unwritten extents never reach the disk). */
static int prepare_file(const struct options *o)
{
	struct stat st;
	const size_t chunk = 1 << 20;
	char *buf;
	int fd;
	unsigned long long i;

	if (stat(o->file, &st) == 0 && (unsigned long long)st.st_size >= o->file_mib << 20)
		return 0;
	fd = open(o->file, O_WRONLY | O_CREAT | O_TRUNC, 0644);
	if (fd < 0)
		return -errno;
	buf = malloc(chunk);
	if (!buf) {
		close(fd);
		return -ENOMEM;
	}
	for (i = 0; i < chunk; i++)
		buf[i] = (char)(i * 7);
	for (i = 0; i < o->file_mib; i++) {
		if (write(fd, buf, chunk) != (ssize_t)chunk) {
			free(buf);
			close(fd);
			return -EIO;
		}
	}
	free(buf);
	fsync(fd);
	close(fd);
	return 0;
}

static struct io_uring ring;

/* The status "register" the wait helpers poll: is a completion there? */
static int cqe_ready(int unused)
{
	struct io_uring_cqe *cqe;

	(void)unused;
	return io_uring_peek_cqe(&ring, &cqe) == 0;
}

/* Blocks until the completion is there (the IRQ path of a user-space driver). */
static int wait_blocking(struct io_uring_cqe **cqe)
{
	return io_uring_wait_cqe(&ring, cqe);
}

static int load_table(const char *name, struct spintune_table *table,
		      struct spintune_entry *storage, uint8_t *blob)
{
	char path[256];
	struct stat st;
	void *addr;
	uint32_t len = 0, seq = 0;
	int fd, rc;

	snprintf(path, sizeof(path), "/%s", name[0] == '/' ? name + 1 : name);
	fd = shm_open(path, O_RDONLY, 0);
	if (fd < 0)
		return -errno;
	if (fstat(fd, &st) != 0) {
		close(fd);
		return -errno;
	}
	addr = mmap(0, (size_t)st.st_size, PROT_READ, MAP_SHARED, fd, 0);
	close(fd);
	if (addr == MAP_FAILED)
		return -errno;
	rc = spintune_shm_snapshot((const struct spintune_shm *)addr, blob,
				   SPINTUNE_BLOB_HEADER_BYTES + SPINTUNE_MAX_ENTRIES * SPINTUNE_BLOB_ENTRY_BYTES,
				   &len, &seq, 1000);
	munmap(addr, (size_t)st.st_size);
	if (rc)
		return rc;
	return spintune_blob_parse(blob, len, storage, SPINTUNE_MAX_ENTRIES, table);
}

/* Size class: the bit width of the length (policy.h). */
static unsigned size_class(unsigned bytes)
{
	unsigned c = 0;

	while (bytes) {
		c++;
		bytes >>= 1;
	}
	return c;
}

/* The outcome report (docs/verification.md), one object per key and arm:
 * @incumbent (NULL: none) holds the A/B trials' incumbent arms. */
static int write_report(const char *path, int nsizes, const unsigned *sizes, const char *mode,
			struct opstats stats[2][MAX_SIZES], struct opstats incumbent[2][MAX_SIZES],
			unsigned long long version)
{
	FILE *f = fopen(path, "w");
	int k, s, a, first = 1;

	if (!f)
		return -1;
	fprintf(f, "{\"format\": \"spintune-outcomes\", \"format_version\": 1, \"device\": \"%s\",\n"
		" \"mode\": \"%s\", \"policy_version\": %llu, \"keys\": [",
		DEVICE_NAME, mode, version);
	for (a = 0; a < (incumbent ? 2 : 1); a++) {
		for (k = 0; k < 2; k++) {
			for (s = 0; s < nsizes; s++) {
				const struct opstats *st = a ? &incumbent[k][s] : &stats[k][s];

				if (!st->count)
					continue;
				fprintf(f, "%s\n  {\"cpu_class\": \"default\", \"opcode\": %d, "
					"\"bytes\": %u, \"size_class\": %u,%s \"requests\": %lu, "
					"\"cpu_ns_sum\": %.17g, \"latency_ns_sum\": %.17g, "
					"\"cpu_ns_sq_sum\": %.17g, \"latency_ns_sq_sum\": %.17g, "
					"\"cpu_latency_ns_sum\": %.17g}",
					first ? "" : ",", k, sizes[s], size_class(sizes[s]),
					a ? " \"arm\": \"incumbent\"," : "", st->count, st->cpu_ns,
					st->latency_ns, st->cpu_sq, st->latency_sq, st->cpu_latency);
				first = 0;
			}
		}
	}
	fprintf(f, "\n]}\n");
	return fclose(f);
}

int main(int argc, char **argv)
{
	struct options o = {0};
	/* per run mode (table, block, spin, and the table's A/B incumbent arm),
	 * opcode and size */
	static const char *const run_names[4] = {"table", "block", "spin", "table, incumbent arm"};
	struct opstats stats[4][2][MAX_SIZES];
	struct spintune_ab ab;
	static struct spintune_entry storage[SPINTUNE_MAX_ENTRIES];
	static uint8_t blob[SPINTUNE_BLOB_HEADER_BYTES + SPINTUNE_MAX_ENTRIES * SPINTUNE_BLOB_ENTRY_BYTES];
	struct spintune_table table = {0};
	struct spintune_wait_stats wstats = {0};
	FILE *csv = 0;
	void *buf;
	int fd, rc, measure, spin_mode, block_mode, table_mode, compare, r;
	unsigned long i;
	unsigned long long blocks;
	/* measure mode, per (opcode, size): the blocking path against spinning */
	double block_lat[2][MAX_SIZES] = {{0}}, block_cpu = 0, spin_lat[2][MAX_SIZES] = {{0}};
	unsigned long nblock[2][MAX_SIZES] = {{0}}, nspin[2][MAX_SIZES] = {{0}}, nblock_all = 0;
	double peek_ns = 0;
	unsigned long npeek = 0;

	if (parse(argc, argv, &o)) {
		usage(stderr);
		return 2;
	}
	measure = !strcmp(o.mode, "measure");
	spin_mode = !strcmp(o.mode, "spin");
	block_mode = !strcmp(o.mode, "block");
	table_mode = !strcmp(o.mode, "table");
	compare = !strcmp(o.mode, "compare");
	if ((table_mode || compare) && (rc = load_table(o.shm, &table, storage, blob)) != 0) {
		fprintf(stderr, "spintune-uring-ref: cannot load the table from shm %s: %s\n", o.shm,
			strerror(-rc));
		return 1;
	}
	spintune_ab_init(&ab, &table);
	if ((rc = prepare_file(&o)) != 0) {
		fprintf(stderr, "spintune-uring-ref: %s: %s\n", o.file, strerror(-rc));
		return 1;
	}
	fd = open(o.file, O_RDWR | O_DIRECT);
	if (fd < 0) {
		fprintf(stderr, "spintune-uring-ref: %s: O_DIRECT: %s\n", o.file, strerror(errno));
		return 1;
	}
	if ((rc = io_uring_queue_init(8, &ring, 0)) < 0) {
		fprintf(stderr, "spintune-uring-ref: io_uring unavailable: %s\n", strerror(-rc));
		return 77;
	}
	if (posix_memalign(&buf, 4096, 1 << 20)) {
		fprintf(stderr, "spintune-uring-ref: out of memory\n");
		return 1;
	}
	memset(buf, 0x5a, 1 << 20);
	memset(stats, 0, sizeof(stats));
	if (measure) {
		csv = fopen(o.csv, "w");
		if (!csv) {
			fprintf(stderr, "spintune-uring-ref: %s: %s\n", o.csv, strerror(errno));
			return 1;
		}
		fprintf(csv, "device,opcode,bytes,wait_ns,path,cpu_class\n");
	}
	blocks = (o.file_mib << 20) / 4096;
	srand(1);
	for (i = 0; i < o.ops; i++) {
		const int op = (int)(i % 2); /* alternate reads and writes */
		const int si = (int)((i / 2) % (unsigned long)o.nsizes);
		const unsigned size = o.sizes[si];
		const unsigned long long off =
			((unsigned long long)rand() % (blocks - size / 4096)) * 4096ull;
		struct io_uring_sqe *sqe = io_uring_get_sqe(&ring);
		struct io_uring_cqe *cqe = 0;
		uint64_t ts, t0, c0, t1, c1;
		int arm = 0; /* the A/B trial's incumbent arm (stats[3]) */

		/* measure: one request in 8, spread over every key, blocks (costs);
		 * the rest spin (exact completion times). compare: table, block
		 * and spin take turns, so all three see the disk in the same state,
		 * in an order that cycles through all six permutations: each mode
		 * follows each other mode equally often (spinning slows the next
		 * few requests on a VM, whichever mode they belong to). */
		static const int order[6][3] = {
			{0, 1, 2}, {1, 2, 0}, {2, 0, 1}, {0, 2, 1}, {2, 1, 0}, {1, 0, 2},
		};
		const unsigned long group = i / 2 / (unsigned long)o.nsizes;
		const int run = compare ? order[(group / 3) % 6][group % 3]
				: block_mode ? 1 : spin_mode ? 2 : 0;
		const int block_now =
			(run == 1 && !measure) || (measure && ((i * 2654435761ul) >> 7) % 8 == 0);

		if (op == 0)
			io_uring_prep_read(sqe, fd, buf, size, off);
		else
			io_uring_prep_write(sqe, fd, buf, size, off);
		/* The wait starts when the submission returns: io_uring_enter()
		 * issues the command to the device (on this VM about 13 us of CPU
		 * for a 4 KiB read), the same under every wait, and the driver
		 * cannot spin during it. Completion time, latency and CPU are
		 * measured from here, so the cost model prices the wait it
		 * decides (a spin costs the time it spins) and not the issue. */
		ts = now_ns();
		io_uring_submit(&ring);
		t0 = now_ns();
		c0 = cpu_ns();
		if (block_now) {
			rc = wait_blocking(&cqe);
		} else if (run == 2 || measure) {
			uint64_t p0 = now_ns();
			unsigned long peeks = 0;

			while (io_uring_peek_cqe(&ring, &cqe) != 0)
				peeks++;
			if (measure && peeks) {
				peek_ns += (double)(now_ns() - p0) / (double)(peeks + 1);
				npeek++;
			}
			rc = 0;
		} else {
			const struct spintune_entry *e = spintune_ab_pick(
				&table, spintune_lookup(&table, 0, (uint32_t)op, size), &ab);
			int ready = 0;

			arm = spintune_entry_is_incumbent(e);
			rc = spintune_wait(e, cqe_ready, ready, ready, 1000000000ull, &wstats, 0);
			if (rc == SPINTUNE_ARM_IRQ) {
				stats[arm ? 3 : run][op][si].irq_fallbacks++;
			} else if (rc == 0) {
				stats[arm ? 3 : run][op][si].spin_hits++;
			}
			/* Collect the CQE: returns at once when the spin saw it, else
			 * blocks in the kernel (the IRQ path). */
			rc = wait_blocking(&cqe);
		}
		t1 = now_ns();
		c1 = cpu_ns();
		if (rc < 0 || !cqe || cqe->res < 0 || (unsigned)cqe->res != size) {
			fprintf(stderr, "spintune-uring-ref: request %lu failed: %s\n", i,
				strerror(cqe && cqe->res < 0 ? -cqe->res : -rc));
			return 1;
		}
		io_uring_cqe_seen(&ring, cqe);
		{
			struct opstats *st = &stats[arm ? 3 : run][op][si];

			st->count++;
			st->submit_ns += (double)(t0 - ts);
			st->latency_ns += (double)(t1 - t0);
			st->cpu_ns += (double)(c1 - c0);
			st->latency_sq += (double)(t1 - t0) * (double)(t1 - t0);
			st->cpu_sq += (double)(c1 - c0) * (double)(c1 - c0);
			st->cpu_latency += (double)(c1 - c0) * (double)(t1 - t0);
		}
		if (measure) {
			if (block_now) {
				block_lat[op][si] += (double)(t1 - t0);
				block_cpu += (double)(c1 - c0);
				nblock[op][si]++;
				nblock_all++;
			} else {
				spin_lat[op][si] += (double)(t1 - t0);
				nspin[op][si]++;
				fprintf(csv, "%s,%d,%u,%llu,spin,default\n", DEVICE_NAME, op, size,
					(unsigned long long)(t1 - t0));
			}
		}
	}

	if (measure) {
		/* Timer: a 5 us nanosleep's oversleep and CPU cost. */
		double tw = 0, tc = 0, wake = 0, wake_n = 0;
		const int nt = 200;
		FILE *pf;
		int k, s;

		/* Wake latency: blocking minus spinning latency of the same key. */
		for (k = 0; k < 2; k++) {
			for (s = 0; s < o.nsizes; s++) {
				if (!nblock[k][s] || !nspin[k][s])
					continue;
				wake += (block_lat[k][s] / (double)nblock[k][s] -
					 spin_lat[k][s] / (double)nspin[k][s]) * (double)nblock[k][s];
				wake_n += (double)nblock[k][s];
			}
		}
		wake = wake_n > 0 && wake > 0 ? wake / wake_n : 0;

		for (i = 0; i < (unsigned long)nt; i++) {
			const uint64_t a = now_ns(), ca = cpu_ns();
			struct timespec ts = {0, 5000};

			nanosleep(&ts, 0);
			tw += (double)(now_ns() - a) - 5000.0;
			tc += (double)(cpu_ns() - ca);
		}
		fclose(csv);
		pf = fopen(o.platform, "w");
		if (!pf) {
			fprintf(stderr, "spintune-uring-ref: %s: %s\n", o.platform, strerror(errno));
			return 1;
		}
		/* The blocking path adds (its latency - the spin latency) on average
		 * and costs its own CPU time; one peek is the status read. */
		fprintf(pf,
			"{\"board\": \"this-host-io_uring\",\n"
			" \"irq_cpu_ns\": %.0f,\n \"irq_wake_ns\": %.0f,\n \"poll_read_ns\": %.0f,\n"
			" \"timer_cpu_ns\": %.0f,\n \"timer_wake_ns\": %.0f,\n"
			" \"devices\": [{\"name\": \"%s\", \"driver\": \"io_uring\", \"model\": \"%s\",\n"
			"   \"default_rules\": [{\"opcode\": null, \"strategy\": \"irq\", "
			"\"note\": \"io_uring_wait_cqe: always block\"}]}]}\n",
			nblock_all ? block_cpu / (double)nblock_all : 0.0, wake,
			npeek && peek_ns / (double)npeek > 1 ? peek_ns / (double)npeek : 50.0,
			tc / nt, tw / nt > 0 ? tw / nt : 0.0, DEVICE_NAME, o.file);
		fclose(pf);
	}

	printf("spintune-uring-ref mode=%s file=%s ops=%lu\n", o.mode, o.file, o.ops);
	if (table_mode || compare)
		printf("table version %llu (%u entries) from shm %s\n",
		       (unsigned long long)table.version, table.count, o.shm);
	for (r = 0; r < 4; r++) {
		int any = 0, k, s;
		char path[4096];

		for (k = 0; k < 2; k++)
			for (s = 0; s < o.nsizes; s++)
				any |= stats[r][k][s].count > 0;
		if (!any)
			continue;
		if (compare || r == 3)
			printf("%s:\n", run_names[r]);
		printf("%-6s %-8s %8s %14s %14s %10s %10s %12s\n", "OPCODE", "BYTES", "COUNT",
		       "LATENCY/REQ", "CPU/REQ", "SPIN HITS", "IRQ", "SUBMIT/REQ");
		for (k = 0; k < 2; k++) {
			for (s = 0; s < o.nsizes; s++) {
				const struct opstats *st = &stats[r][k][s];

				if (!st->count)
					continue;
				printf("%-6s %-8u %8lu %12.1fus %12.1fus %10lu %10lu %10.1fus\n",
				       k == 0 ? "read" : "write", o.sizes[s], st->count,
				       st->latency_ns / (double)st->count / 1000.0,
				       st->cpu_ns / (double)st->count / 1000.0, st->spin_hits,
				       st->irq_fallbacks, st->submit_ns / (double)st->count / 1000.0);
			}
		}
		if (!o.report || r == 3) /* the incumbent arm is in the table's report */
			continue;
		/* compare: one report per run mode, PREFIX-MODE.json */
		snprintf(path, sizeof(path), compare ? "%s-%s.json" : "%s", o.report, run_names[r]);
		if (write_report(path, o.nsizes, o.sizes, run_names[r], stats[r],
				 r == 0 && spintune_trial_count(&table) ? stats[3] : NULL,
				 r == 0 ? table.version : 0) != 0) {
			fprintf(stderr, "spintune-uring-ref: %s: %s\n", path, strerror(errno));
			return 1;
		}
	}
	io_uring_queue_exit(&ring);
	close(fd);
	free(buf);
	return 0;
}

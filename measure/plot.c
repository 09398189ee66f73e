/* plot.c - see plot.h. */
#include "plot.h"

#include <errno.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

/* A gnuplot single-quoted string: only '' is special there; a line break
 * would end the command, so control characters become spaces. */
static void quoted(FILE *g, const char *s)
{
	fputc('\'', g);
	for (; s && *s; s++) {
		if (*s == '\'')
			fputs("''", g);
		else
			fputc((unsigned char)*s < 0x20 ? ' ' : *s, g);
	}
	fputc('\'', g);
}

static void setting(FILE *g, const char *what, const char *text)
{
	fprintf(g, "set %s ", what);
	quoted(g, text ? text : "");
	fputc('\n', g);
}

/* Points gnuplot could not place (NaN, or not positive on a log axis) are
 * left out here rather than warned about there. */
static bool drawable(const struct plot *p, double x, double y)
{
	return isfinite(x) && isfinite(y) && (!p->logx || x > 0) && (!p->logy || y > 0);
}

/* Boxes as wide as the closest two points: gnuplot's default width spans
 * to the neighbours, so the gaps left by empty bins would widen them. */
static void box_width(FILE *g, const struct plot_panel *panel)
{
	double width = INFINITY;
	for (size_t i = 0; i < panel->count; i++) {
		const struct plot_series *s = &panel->series[i];
		for (size_t j = 1; j < s->n; j++) {
			double d = fabs(s->x[j] - s->x[j - 1]);
			width = d > 0 && d < width ? d : width;
		}
	}
	if (isfinite(width))
		fprintf(g, "set boxwidth %.10g absolute\n", width);
	else
		fputs("set boxwidth\n", g);
}

static void panel(FILE *g, const struct plot_panel *panel, size_t first_block)
{
	static const char *const styles[] = { "lines", "steps", "boxes", "linespoints" };
	const struct plot *p = &panel->plot;
	setting(g, "title", p->title);
	setting(g, "xlabel", p->xlabel);
	setting(g, "ylabel", p->ylabel);
	fprintf(g, "%sset logscale x\n%sset logscale y\n", p->logx ? "" : "un",
		p->logy ? "" : "un");
	if (p->style == PLOT_BOXES)
		box_width(g, panel);
	for (size_t i = 0; i < panel->count; i++) {
		fprintf(g, "%s $d%zu using 1:2 with %s", i ? ", \\\n    " : "plot", first_block + i,
			styles[p->style <= PLOT_LINESPOINTS ? p->style : PLOT_LINES]);
		if (panel->series[i].title) {
			fputs(" title ", g);
			quoted(g, panel->series[i].title);
		} else {
			fputs(" notitle", g);
		}
	}
	fputc('\n', g);
}

static void script(FILE *g, const char *path, const struct plot_panel *panels, size_t count)
{
	size_t block = 0;
	for (size_t k = 0; k < count; k++) {
		for (size_t i = 0; i < panels[k].count; i++, block++) {
			const struct plot_series *s = &panels[k].series[i];
			fprintf(g, "$d%zu << EOD\n", block);
			for (size_t j = 0; j < s->n; j++)
				if (drawable(&panels[k].plot, s->x[j], s->y[j]))
					fprintf(g, "%.10g %.10g\n", s->x[j], s->y[j]);
			fputs("EOD\n", g);
		}
	}
	/* noenhanced: figure names are full of underscores, not subscripts. */
	fprintf(g, "set terminal pngcairo noenhanced size %zu,600\n", 1000 + 500 * (count - 1));
	setting(g, "output", path);
	fputs("set grid\nset style fill solid 0.5\n", g);
	if (count > 1)
		fprintf(g, "set multiplot layout 1,%zu\n", count);
	block = 0;
	for (size_t k = 0; k < count; k++) {
		panel(g, &panels[k], block);
		block += panels[k].count;
	}
	if (count > 1)
		fputs("unset multiplot\n", g);
	fputs("unset output\n", g);
}

bool plot_gnuplot_found(void)
{
	/* what `exec gnuplot` in sh finds: PATH (sh's default when unset), "" is "." */
	const char *dirs = getenv("PATH");
	if (!dirs)
		dirs = "/usr/local/bin:/usr/bin:/bin";
	for (const char *d = dirs;; d++) {
		size_t len = strcspn(d, ":");
		char file[4096];
		int n = snprintf(file, sizeof file, "%.*s/gnuplot", len ? (int)len : 1,
				 len ? d : ".");
		struct stat st;
		if (n > 0 && (size_t)n < sizeof file && !stat(file, &st) && S_ISREG(st.st_mode) &&
		    !access(file, X_OK))
			return true;
		d += len;
		if (!*d)
			return false;
	}
}

int plot_png_panels(const char *path, const struct plot_panel *panels, size_t count)
{
	size_t points = 0;
	bool empty_panel = !count;
	for (size_t k = 0; k < count; k++) {
		empty_panel = empty_panel || !panels[k].count;
		for (size_t i = 0; i < panels[k].count; i++)
			points += panels[k].series[i].n;
	}
	if (empty_panel || !points) {
		fprintf(stderr, "plot: %s: nothing to draw\n", path);
		return -1;
	}
	/* gnuplot draws on its stdout when it cannot open the output: find out first. */
	FILE *out = fopen(path, "wb");
	if (!out) {
		fprintf(stderr, "plot: %s: %s\n", path, strerror(errno));
		return -1;
	}
	fclose(out);
	/* A gnuplot that is missing or dies early must not kill us with SIGPIPE. */
	struct sigaction ignore = { .sa_handler = SIG_IGN }, old;
	sigaction(SIGPIPE, &ignore, &old);
	fflush(NULL);
	FILE *g = popen("exec gnuplot", "w");
	int status = -1;
	if (g) {
		script(g, path, panels, count);
		status = pclose(g);
	}
	sigaction(SIGPIPE, &old, NULL);
	struct stat st;
	if (status == -1 || !WIFEXITED(status) || WEXITSTATUS(status)) {
		fprintf(stderr, "plot: %s: %s\n", path,
			status != -1 && WIFEXITED(status) && WEXITSTATUS(status) == 127 ?
				"gnuplot not found (Debian: apt-get install gnuplot-nox)" :
				"gnuplot failed (its message is above)");
		return -1;
	}
	if (stat(path, &st) || !st.st_size) {
		fprintf(stderr, "plot: %s: gnuplot wrote no picture\n", path);
		return -1;
	}
	return 0;
}

int plot_png(const char *path, const struct plot *p, const struct plot_series *s, size_t count)
{
	struct plot_panel one = { *p, s, count };
	return plot_png_panels(path, &one, 1);
}

size_t lateness_cdf(struct lateness *l, double *x_us, double *y, size_t max_points)
{
	/* A snapshot, so the fractions end at exactly 1 even while runs go on. */
	uint64_t *b = malloc(LATENESS_BUCKETS * sizeof *b), total = 0, seen = 0;
	size_t used = 0, written = 0;
	if (!b)
		return 0;
	for (size_t i = 0; i < LATENESS_BUCKETS; i++) {
		b[i] = atomic_load_explicit(&l->bucket[i], memory_order_relaxed);
		total += b[i];
		used += b[i] != 0;
	}
	if (!used || !max_points) {
		free(b);
		return 0;
	}
	size_t step = (used + max_points - 1) / max_points, nth = 0;
	double max_us = (double)atomic_load_explicit(&l->max_ns, memory_order_relaxed) / 1e3;
	for (size_t i = 0; i < LATENESS_BUCKETS; i++) {
		if (!b[i])
			continue;
		seen += b[i];
		if (++nth % step && nth != used)
			continue;
		/* Each point at its bucket's upper edge; the last bucket ends at the max. */
		double high_us = (double)lateness_bucket_high_us((unsigned)i);
		if (i == LATENESS_BUCKETS - 1)
			high_us = fmax(high_us, max_us);
		x_us[written] = high_us;
		y[written++] = (double)seen / (double)total;
	}
	free(b);
	return written;
}

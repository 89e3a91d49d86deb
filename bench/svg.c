/* The few SVG primitives the charts are drawn with: plain SVG 1.1 that any
 * browser or rsvg renders, text escaped, sizes in pixels. */
#include <math.h>
#include <stdarg.h>

#include "bench/bench.h"

static void escaped(FILE *f, const char *s)
{
    for (; *s; s++) {
        switch (*s) {
        case '<': fputs("&lt;", f); break;
        case '>': fputs("&gt;", f); break;
        case '&': fputs("&amp;", f); break;
        case '"': fputs("&quot;", f); break;
        default:
            if ((unsigned char)*s >= 0x20 || *s == '\t')
                fputc(*s, f);
        }
    }
}

void hxb_svg_begin(FILE *f, int w, int h)
{
    fprintf(f, "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
               "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%d\" viewBox=\"0 0 %d %d\" "
               "font-family=\"DejaVu Sans, Helvetica, Arial, sans-serif\">\n"
               "<rect x=\"0\" y=\"0\" width=\"%d\" height=\"%d\" fill=\"white\"/>\n",
            w, h, w, h, w, h);
}

void hxb_svg_end(FILE *f) { fputs("</svg>\n", f); }

void hxb_svg_text(FILE *f, double x, double y, const char *anchor, int size, const char *fill, const char *fmt,
                  ...)
{
    char buf[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    fprintf(f, "<text x=\"%.1f\" y=\"%.1f\" font-size=\"%d\" text-anchor=\"%s\" fill=\"%s\">", x, y, size,
            anchor, fill);
    escaped(f, buf);
    fputs("</text>\n", f);
}

void hxb_svg_rect(FILE *f, double x, double y, double w, double h, const char *fill, const char *title)
{
    fprintf(f, "<rect x=\"%.2f\" y=\"%.2f\" width=\"%.2f\" height=\"%.2f\" fill=\"%s\"", x, y, w > 0 ? w : 0,
            h > 0 ? h : 0, fill);
    if (title) {
        fputs("><title>", f);
        escaped(f, title);
        fputs("</title></rect>\n", f);
    } else {
        fputs("/>\n", f);
    }
}

void hxb_svg_line(FILE *f, double x1, double y1, double x2, double y2, const char *stroke, double width)
{
    fprintf(f, "<line x1=\"%.2f\" y1=\"%.2f\" x2=\"%.2f\" y2=\"%.2f\" stroke=\"%s\" stroke-width=\"%.2f\"/>\n", x1,
            y1, x2, y2, stroke, width);
}

/* A qualitative palette that stays distinct for the colour-blind
 * (Okabe-Ito), then a few more, then darker and lighter variants of the
 * first ones: a comparison of 3 device sets x 4 policies has 12 bars, and
 * two bars of one colour would read as one configuration. */
static const char *const palette[] = {"#0072B2", "#E69F00", "#009E73", "#CC79A7", "#56B4E9", "#D55E00", "#F0E442",
                                      "#000000", "#999999", "#882255", "#003F63", "#8A5F00", "#00573F", "#7A3F66",
                                      "#A6D5F2", "#F5B27F", "#8C8421", "#44AA99", "#332288", "#DDCC77"};
static const char palette_light[] = {0, 1, 0, 0, 1, 0, 1, 0, 1, 0, 0, 0, 0, 0, 1, 1, 0, 1, 0, 1};

const char *hxb_svg_color(int i) { return palette[(unsigned)i % (sizeof palette / sizeof palette[0])]; }

/* Text drawn on a box of colour i: black on the light ones. */
const char *hxb_svg_ink(int i) { return palette_light[(unsigned)i % sizeof palette_light] ? "#000" : "#fff"; }

/* A round tick step (1, 2 or 5 times a power of ten) giving about
 * `ticks` ticks up to max. */
double hxb_svg_nice_step(double max, int ticks)
{
    if (!(max > 0))
        return 1;
    double raw = max / ticks, p = pow(10, floor(log10(raw))), m = raw / p;
    return (m <= 1 ? 1 : m <= 2 ? 2 : m <= 5 ? 5 : 10) * p;
}

/* Issue 20 and 27, the C side of the acceptance: a blob the compiler wrote verifies with
 * mfc_verify and opens verified with mfc_stream_open (its default), and the same blob with its
 * recorded sensitivity lowered by 1% and its CRC-32 recomputed is refused by both
 * (MFC_STATUS_SENSITIVITY_UNDERSTATED), also with MFC_OPEN_ALLOW_UNVERIFIED.
 *
 *   verify BLOB                    the check above; exit 0 when it holds
 *   verify --scale F BLOB OUT      writes BLOB with its recorded sensitivity multiplied by F (CRC
 *                                  recomputed) to OUT, checking nothing: forged blobs for admit.c
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mfc.h"

#define DIM 2

/* CRC-32/ISO-HDLC, the blob's checksum (formats/SPEC.md). */
static uint32_t crc32(const uint8_t *p, size_t n) {
    uint32_t c = 0xffffffffu;
    for (size_t i = 0; i < n; i++) {
        c ^= p[i];
        for (int k = 0; k < 8; k++) c = (c >> 1) ^ (0xedb88320u & (0u - (c & 1u)));
    }
    return ~c;
}

/* Skips one postcard varint at *at. */
static void varint(const uint8_t *p, size_t *at) {
    while (p[(*at)++] & 0x80) {
    }
}

/* The offset of header.sensitivity.value in the payload (formats/SPEC.md, "Payload"). */
static size_t sensitivity_offset(const uint8_t *blob) {
    size_t at = 16;
    uint8_t workload = blob[at++];
    if (workload == 1) { /* Custom { label } */
        size_t len = 0, shift = 0;
        while (blob[at] & 0x80) len |= (size_t)(blob[at++] & 0x7f) << shift, shift += 7;
        len |= (size_t)blob[at++] << shift;
        at += len;
    }
    varint(blob, &at); /* steps */
    uint8_t participation = blob[at++];
    if (participation != 0) { /* k and b */
        varint(blob, &at);
        varint(blob, &at);
    }
    return at;
}

/* Multiplies the recorded sensitivity by `factor` and recomputes the CRC (little-endian hosts). */
static void scale(uint8_t *blob, size_t len, double factor) {
    size_t at = sensitivity_offset(blob);
    double recorded;
    memcpy(&recorded, blob + at, 8);
    recorded *= factor;
    memcpy(blob + at, &recorded, 8);
    uint32_t crc = crc32(blob, len - 4);
    memcpy(blob + len - 4, &crc, 4);
}

static enum MfcStatus check(const uint8_t *blob, size_t len, double *bound) {
    size_t need = 0;
    enum MfcStatus s = mfc_verify_scratch_len(blob, len, &need);
    if (s != MFC_STATUS_OK) return s;
    double *scratch = need ? calloc(need, sizeof(double)) : NULL;
    s = mfc_verify(blob, len, scratch, need, 0, bound);
    free(scratch);
    return s;
}

/* mfc_stream_open with `flags` and scratch of the size the blob needs; the verdict when it opens. */
static enum MfcStatus open_with(const uint8_t *blob, size_t len, uint32_t flags,
                                MfcVerdict *verdict) {
    size_t floats = 0, doubles = 0;
    enum MfcStatus s = mfc_workspace_len(blob, len, DIM, &floats);
    if (s == MFC_STATUS_OK) s = mfc_verify_scratch_len(blob, len, &doubles);
    if (s != MFC_STATUS_OK) return s;
    static MfcStreamStorage storage;
    static const uint8_t seed[32] = "verify.c seed, demo only.......";
    float *workspace = calloc(floats, sizeof(float));
    double *scratch = calloc(doubles + 1, sizeof(double));
    MfcOpenOptions options = {0};
    options.flags = flags;
    options.scratch = scratch;
    options.scratch_len = doubles;
    MfcStream *stream = NULL;
    s = mfc_stream_open(&storage, blob, len, DIM, workspace, floats, seed, &options, &stream);
    *verdict = mfc_stream_verdict(stream);
    if (s == MFC_STATUS_OK && mfc_stream_close(stream) != MFC_STATUS_OK) s = MFC_STATUS_REFUSED;
    free(scratch);
    free(workspace);
    return s;
}

int main(int argc, char **argv) {
    int scaling = argc == 5 && strcmp(argv[1], "--scale") == 0;
    if (argc != 2 && !scaling) {
        fprintf(stderr, "usage: verify BLOB | verify --scale FACTOR BLOB OUT\n");
        return 2;
    }
    FILE *f = fopen(argv[scaling ? 3 : 1], "rb");
    if (!f) return 2;
    static uint8_t blob[1 << 20];
    size_t len = fread(blob, 1, sizeof blob, f);
    fclose(f);
    if (scaling) {
        scale(blob, len, strtod(argv[2], NULL));
        FILE *out = fopen(argv[4], "wb");
        if (!out || fwrite(blob, 1, len, out) != len || fclose(out) != 0) return 2;
        return 0;
    }
    double bound = 0.0;
    enum MfcStatus good = check(blob, len, &bound);
    MfcVerdict verdict = MFC_VERDICT_NO_STREAM, ignored;
    enum MfcStatus opened = open_with(blob, len, 0, &verdict);
    double recorded;
    memcpy(&recorded, blob + sensitivity_offset(blob), 8);
    scale(blob, len, 0.99);
    enum MfcStatus bad = check(blob, len, NULL);
    enum MfcStatus refused = open_with(blob, len, 0, &ignored);
    enum MfcStatus allowed = open_with(blob, len, MFC_OPEN_ALLOW_UNVERIFIED, &ignored);
    printf("%s: recorded %.9f, bound %.9f: status %d, open %d (verdict %d); lowered 1%%: status "
           "%d, open %d, with MFC_OPEN_ALLOW_UNVERIFIED %d\n",
           argv[1], recorded, bound, (int)good, (int)opened, (int)verdict, (int)bad, (int)refused,
           (int)allowed);
    return good == MFC_STATUS_OK && opened == MFC_STATUS_OK && verdict == MFC_VERDICT_VERIFIED &&
                   bad == MFC_STATUS_SENSITIVITY_UNDERSTATED &&
                   refused == MFC_STATUS_SENSITIVITY_UNDERSTATED &&
                   allowed == MFC_STATUS_SENSITIVITY_UNDERSTATED
               ? 0
               : 1;
}

/* Issue 20, the C side of the acceptance: a blob the compiler wrote verifies with mfc_verify,
 * and the same blob with its recorded sensitivity lowered by 1% and its CRC-32 recomputed is
 * refused (MFC_STATUS_SENSITIVITY_UNDERSTATED). Usage: verify BLOB. Exit 0 when both hold. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mfc.h"

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

static enum MfcStatus check(const uint8_t *blob, size_t len, double *bound) {
    size_t need = 0;
    enum MfcStatus s = mfc_verify_scratch_len(blob, len, &need);
    if (s != MFC_STATUS_OK) return s;
    double *scratch = need ? calloc(need, sizeof(double)) : NULL;
    s = mfc_verify(blob, len, scratch, need, UINT64_MAX, bound);
    free(scratch);
    return s;
}

int main(int argc, char **argv) {
    if (argc != 2) {
        fprintf(stderr, "usage: verify BLOB\n");
        return 2;
    }
    FILE *f = fopen(argv[1], "rb");
    if (!f) return 2;
    static uint8_t blob[1 << 20];
    size_t len = fread(blob, 1, sizeof blob, f);
    fclose(f);
    double bound = 0.0;
    enum MfcStatus good = check(blob, len, &bound);
    size_t at = sensitivity_offset(blob);
    double recorded;
    memcpy(&recorded, blob + at, 8);
    double lowered = recorded * 0.99;
    memcpy(blob + at, &lowered, 8);
    uint32_t crc = crc32(blob, len - 4);
    memcpy(blob + len - 4, &crc, 4); /* little-endian hosts */
    enum MfcStatus bad = check(blob, len, NULL);
    printf("%s: recorded %.9f, bound %.9f: status %d; lowered 1%%: status %d\n", argv[1], recorded,
           bound, (int)good, (int)bad);
    return good == MFC_STATUS_OK && bad == MFC_STATUS_SENSITIVITY_UNDERSTATED ? 0 : 1;
}

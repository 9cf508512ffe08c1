-- AlterTable
ALTER TABLE "Review" ADD COLUMN     "deadlineDoneAt" TIMESTAMP(3),
ADD COLUMN     "deadlineHandledAt" TIMESTAMP(3),
ADD COLUMN     "decideBy" TIMESTAMP(3),
ADD COLUMN     "decidedByDeadline" BOOLEAN NOT NULL DEFAULT false,
ADD COLUMN     "escalatedAt" TIMESTAMP(3),
ADD COLUMN     "escalatedTo" TEXT,
ADD COLUMN     "onTimeout" TEXT,
ADD COLUMN     "reassignReason" TEXT,
ADD COLUMN     "reassignedAt" TIMESTAMP(3),
ADD COLUMN     "reassignedBy" TEXT,
ADD COLUMN     "reassignedTo" TEXT;

-- CreateIndex
CREATE INDEX "Review_state_decideBy_idx" ON "Review"("state", "decideBy");

